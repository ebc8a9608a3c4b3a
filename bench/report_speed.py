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
from ipu_keras._src.reports import document, html, plots, profile, trace, writer  # noqa: E402

out = sys.argv[1]
spe = int(sys.argv[2]) if len(sys.argv) > 2 else 1
keras.utils.set_random_seed(0)
base = keras.applications.ResNet50(weights=None, input_shape=(64, 64, 3), classes=10)
model = ipu_keras.Model(base.inputs, base.outputs)
model.compile(keras.optimizers.SGD(0.01), keras.losses.SparseCategoricalCrossentropy(from_logits=True), steps_per_execution=spe)
rng = np.random.default_rng(0)
x = rng.random((8 * spe,) + (64, 64, 3), dtype=np.float32); y = rng.integers(0, 10, 8 * spe).astype(np.int32)
model.fit(x, y, batch_size=8, verbose=0)
prog = model.train_function.last_program
exe = prog.executable
counts = profile._last[0][1] if profile._last else None
t = time.perf_counter(); rep = document.build(exe, "resnet50_train", "k", counts); t_build = time.perf_counter() - t
t = time.perf_counter(); doc = trace.trace_document(rep); t_trace = time.perf_counter() - t
t = time.perf_counter(); page = html.render(rep, {}, doc); t_html = time.perf_counter() - t
os.makedirs(out, exist_ok=True)
t = time.perf_counter(); writer._write_files(out, rep, {}); t_files = time.perf_counter() - t
t = time.perf_counter(); writer._write_files(out, rep, {"cycles.png": plots.cycles_plot, "trace.png": plots.trace_plot}); t_files_png = time.perf_counter() - t
t = time.perf_counter(); writer._write_files(out, rep, plots.STATIC_PLOTS); t_static = time.perf_counter() - t
ev = sum(1 for e in doc["traceEvents"] if e["ph"] == "X")
print(json.dumps({"equations": exe.info["equations"], "steps_per_execution": spe,
  "build_s": round(t_build, 3), "trace_s": round(t_trace, 3), "html_s": round(t_html, 3),
  "write_all_no_png_s": round(t_files, 3), "write_after_run_s(json+trace+cycles/trace png+html)": round(t_files_png, 3),
  "write_at_compile_s(json+trace+4 png+html)": round(t_static, 3), "events": ev,
  "html_MB": round(len(page) / 1e6, 2), "trace_gz_KB": round(os.path.getsize(os.path.join(out, "trace.json.gz")) / 1e3, 1),
  "report_json_MB": round(os.path.getsize(os.path.join(out, "report.json")) / 1e6, 2)}, indent=1))
