"""The `pipeline` analysis: schedules turn per-stage cycles into boxes and a makespan."""
import pytest

from ipu_keras._src.compiler.passes.pipeline import schedule

ROWS = [{"stage": 0, "ipu": 0, "forward": 100, "backward": 200},
        {"stage": 1, "ipu": 1, "forward": 100, "backward": 200}]


def test_sequential_is_the_serial_sum_plus_a_sync_per_box():
    out = schedule(ROWS, 4, "Sequential", sync=10, other=5)
    assert out["makespan_cycles"] == 4 * (600 + 4 * 10) - 10 + 4 * 5
    assert out["serial_cycles"] == 4 * 605
    assert [b[3] for b in out["timeline"][:4]] == ["F", "F", "B", "B"]


def test_grouped_overlaps_the_stages():
    out = schedule(ROWS, 8, "Grouped", sync=0)
    # 8 + 2*2 - 1 = 11 steps; each step's forward phase and backward phase last the
    # slowest active stage: forward in steps 0-8 (stage k on micro-batch t - k),
    # backward in steps 2-10 (stage k on micro-batch t - (3 - k)).
    assert out["makespan_cycles"] == 9 * 100 + 9 * 200
    assert out["makespan_cycles"] < out["serial_cycles"] == 8 * 600
    for ipu in out["ipus"]:
        assert ipu["busy"] == 8 * 300
        assert ipu["busy"] + ipu["idle"] == out["makespan_cycles"]
    boxes = {(b[1], b[2], b[3]): b for b in out["timeline"]}
    assert len(boxes) == 2 * 2 * 8                  # a box per stage, micro-batch and pass
    # micro-batch 0: stage 1's forward after stage 0's, its backward before stage 0's.
    assert boxes[(1, 0, "F")][4] >= boxes[(0, 0, "F")][5]
    assert boxes[(0, 0, "B")][4] >= boxes[(1, 0, "B")][5]


def test_interleaved_runs_each_ipus_passes_back_to_back():
    grouped = schedule(ROWS, 8, "Grouped", sync=50)
    interleaved = schedule(ROWS, 8, "Interleaved", sync=50)
    assert interleaved["makespan_cycles"] < grouped["makespan_cycles"]
    assert sorted(b[:4] for b in interleaved["timeline"]) == sorted(
        b[:4] for b in grouped["timeline"])


@pytest.mark.parametrize("name", ["Grouped", "Interleaved", "Sequential"])
def test_inference_has_forward_boxes_only(name):
    rows = [dict(r, backward=0) for r in ROWS]
    out = schedule(rows, 4, name, sync=0)
    assert {b[3] for b in out["timeline"]} == {"F"} and len(out["timeline"]) == 8


@pytest.mark.parametrize("name", ["Grouped", "Interleaved", "Sequential"])
def test_work_of_no_stage_is_boxes_and_the_boxes_end_at_the_makespan(name):
    # The makespan counts each micro-batch's work outside the stages: the timeline has
    # its boxes, so a drawing of the boxes spans what its title says.
    plain = schedule(ROWS, 4, name, sync=10)
    out = schedule(ROWS, 4, name, sync=10, other={0: 5, 1: 7})
    assert out["makespan_cycles"] == plain["makespan_cycles"] + 4 * 12
    assert max(b[5] for b in out["timeline"]) == out["makespan_cycles"]
    other = [b for b in out["timeline"] if b[3] == "O"]
    assert sorted((b[0], b[2], b[5] - b[4]) for b in other) == sorted(
        (ipu, m, c) for m in range(4) for ipu, c in ((0, 5), (1, 7)))
    for ipu in (0, 1):   # boxes on one IPU never overlap
        row = sorted((b for b in out["timeline"] if b[0] == ipu), key=lambda b: b[4])
        assert all(a[5] <= b[4] for a, b in zip(row, row[1:]))
    # a micro-batch's other work follows its last pass
    for b in other:
        assert b[4] >= max(c[5] for c in out["timeline"] if c[2] == b[2] and c[3] != "O")
