"""docs/supported_ops.md is the text the op registry renders now (TensorFlow-free).

When this fails after adding or changing an importer, regenerate the file with
`python -m ipu_keras._src.conformance.docs`.
"""
import subprocess
import sys

from ipu_keras import supported_ops
from ipu_keras._src.conformance import docs


def test_committed_file_is_current():
    assert docs.DOCS_PATH.read_text(encoding="utf-8") == docs.render_supported_ops(), (
        "docs/supported_ops.md is stale: run `python -m ipu_keras._src.conformance.docs`")


def test_every_supported_op_is_listed_once():
    text = docs.render_supported_ops()
    for tf_type in supported_ops():
        assert text.count(f"| `{tf_type}` |") == 1, tf_type


def test_table_names_the_ops_an_importer_emits():
    table = {tf_type: ops for rows in docs.op_table().values() for tf_type, ops in rows}
    assert table["MatMul"] == ["matmul"]
    assert table["AddV2"] == ["add"]
    assert table["StatelessRandomNormalV2"] == ["random_normal"]
    assert table["SpaceToBatchND"] == ["const", "pad", "reshape", "transpose"]
    assert table["StopGradient"] == []
    families = {module.rsplit(".", 1)[-1] for module in docs.op_table()}
    assert {"math", "nn", "linalg", "image"} <= families and "registry" not in families


def test_rendering_needs_no_tensorflow():
    code = ("import sys; from ipu_keras._src.conformance import docs; docs.render_supported_ops(); "
            "assert 'tensorflow' not in sys.modules")
    subprocess.run([sys.executable, "-c", code], check=True)
