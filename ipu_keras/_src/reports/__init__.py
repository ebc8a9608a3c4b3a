"""Reports of compiled executables: `report.json`, PNG plots, `report.html`, summaries.

The IPU tools' reports, for the simulator: target, per-tile memory by category,
liveness, the program tree with cycles, the execution trace of the last run and the
tensor map. `writer.py` decides where and when files are written, `document.py`
what `report.json` holds, `plots.py` draws the PNGs, `html.py` the page and
`summary.py` the text of `ipu-keras report DIR`. No TensorFlow is imported here;
matplotlib only when plots are drawn.
"""
from ipu_keras._src.reports.writer import (check_outputs, disable_reports, enable_reports,
                                           note_execution, reports_directory, write_compiled,
                                           write_report, write_tensor_map_file)

__all__ = ["check_outputs", "disable_reports", "enable_reports", "note_execution",
           "reports_directory", "write_compiled", "write_report", "write_tensor_map_file"]
