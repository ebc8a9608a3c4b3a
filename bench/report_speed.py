"""Report generation for ResNet-50's training program (64x64x3, batch 8, SGD).

    python bench/report_speed.py OUT_DIR [STEPS_PER_EXECUTION]

Fits one execution, then times building the report dict, the trace, the page and
writing the report folder as the compiler (report.json, trace.json.gz, the four PNGs,
report.html) and a run (report.json, trace.json.gz, cycles.png, trace.png, report.html)
do, and prints the sizes. The issue's goal: under 2 s.
"""
import json
import os
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
import keras  # noqa: E402
import numpy as np  # noqa: E402

import ipu_keras  # noqa: E402
from ipu_keras._src.reports import document, html, plots, trace, writer  # noqa: E402



def _timed(fn, *args):
    start = time.perf_counter()
    result = fn(*args)
    return result, round(time.perf_counter() - start, 3)


def main(out, spe):
    keras.utils.set_random_seed(0)
    base = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
    model = ipu_keras.Model(base.inputs, base.outputs)
    model.compile(keras.optimizers.SGD(0.01),
                  keras.losses.SparseCategoricalCrossentropy(from_logits=True),
                  steps_per_execution=spe)
    rng = np.random.default_rng(0)
    x = rng.random((8 * spe, 64, 64, 3), dtype=np.float32)
    y = rng.integers(0, 10, 8 * spe).astype(np.int32)
    model.fit(x, y, batch_size=8, verbose=0)
    executable = model.train_function.last_program.executable
    counts = model.train_function.last_program.session.engine.counts
    report, build_s = _timed(document.build, executable, "resnet50_train", "k", counts)
    events, trace_s = _timed(trace.trace_document, report)
    page, html_s = _timed(html.render, report, {}, events)
    os.makedirs(out, exist_ok=True)
    _, run_s = _timed(writer._write_files, out, report,
                      {"cycles.png": plots.cycles_plot, "trace.png": plots.trace_plot})
    _, compile_s = _timed(writer._write_files, out, report, plots.STATIC_PLOTS)
    _, no_png_s = _timed(writer._write_files, out, report, {})
    size = lambda name: os.path.getsize(os.path.join(out, name))  # noqa: E731
    print(json.dumps({
        "equations": executable.info["equations"], "steps_per_execution": spe,
        "build_s": build_s, "trace_s": trace_s, "page_s": html_s,
        "folder_after_a_run_s": run_s, "folder_at_compile_s": compile_s,
        "folder_without_pngs_s": no_png_s,
        "trace_slices": sum(1 for e in events["traceEvents"] if e["ph"] == "X"),
        "report_html_MB": round(len(page) / 1e6, 2),
        "trace_json_gz_KB": round(size("trace.json.gz") / 1e3, 1),
        "report_json_MB": round(size("report.json") / 1e6, 2)}, indent=1))


if __name__ == "__main__":
    main(sys.argv[1], int(sys.argv[2]) if len(sys.argv) > 2 else 1)
