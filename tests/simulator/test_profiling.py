"""profiling: the report of the last execution, from the compiler's tables and block counts."""
import numpy as np

from ipu_keras import profiling
from ipu_keras._src.compiler import compile_graph
from ipu_keras._src.simulator import Engine
from tests.graphs import ListStreams, counting_loop, dense_step, small_target


def test_last_report_of_a_loop_counts_its_steps_and_cycles():
    graph, _ = counting_loop(limit=4)
    target = small_target(4)
    exe = compile_graph(graph, target)
    engine = Engine(exe)
    engine.run([np.zeros(2, np.float32)], [], ListStreams([np.ones(2, np.float32)] * 4))
    profiling.record(exe, engine)
    report = profiling.last_report()
    assert profiling.last_report() == report
    assert report.steps == 4
    assert report.cycles == engine.cycles()
    assert report.total_cycles == sum(engine.cycles().values()) > 0
    assert report["target"] == {"name": "ipu2", "tiles_per_ipu": 4, "num_ipus": 1,
                                "bytes_per_tile": 638976, "clock_hz": 1.33e9}
    assert len(report.tile_memory) == 4
    assert report.max_tile_memory == max(report.tile_memory)
    assert np.isclose(report.seconds, report.total_cycles / 1.33e9)
    assert report.to_dict()["steps"] == 4


def test_a_program_without_a_loop_is_one_step_and_lists_its_plans():
    exe = compile_graph(dense_step(), small_target(4))
    engine = Engine(exe)
    engine.run([np.ones((4, 3), np.float32)], [np.ones((3, 2), np.float32)], None)
    profiling.record(exe, engine)
    report = profiling.last_report()
    assert report.steps == 1
    assert [p["op"] for p in report.plans] == ["matmul", "matmul"]
    assert set(report.memory["tile_categories"]) >= {"variables", "temporaries"}
