"""`show`: tag sets, SignatureDef keys and inputs/outputs, in `saved_model_cli`'s format.

Reads the SavedModel protobuf only (nothing is loaded or traced), through
`model.read_saved_model`, with this package's designed errors for a missing, unreadable
or empty SavedModel, tag set or signature key; nothing is printed before they are checked.
"""
from tensorflow.core.framework import types_pb2
from ipu_keras_addons.saved_model_tool import model

_DTYPE_NAMES = {value: key for key, value in types_pb2.DataType.items()}


def show_tag_sets(directory):
    tag_sets = model.tag_sets(directory)   # read first: an error prints no header
    print("The given SavedModel contains the following tag-sets:")
    for tags in tag_sets:
        print("'" + ",".join(tags) + "'")


def show_signature_keys(directory, tag_set):
    meta = model.meta_graph(directory, tag_set)
    print('The given SavedModel MetaGraphDef contains SignatureDefs with the following keys:')
    for key in sorted(meta.signature_def):
        print(f'SignatureDef key: "{key}"')


def show_signature(directory, tag_set, key, indent=0):
    meta = model.meta_graph(directory, tag_set)
    _print_signature(meta, model.signature_def(meta, key, directory), indent)


def _print_signature(meta, signature, indent):
    pad = "  " * indent
    print(pad + "The given SavedModel SignatureDef contains the following input(s):")
    for key, info in sorted(signature.inputs.items()):
        print(pad + f"  inputs['{key}'] tensor_info:")
        _print_tensor_info(info, pad)
    print(pad + "The given SavedModel SignatureDef contains the following output(s):")
    for key, info in sorted(signature.outputs.items()):
        print(pad + f"  outputs['{key}'] tensor_info:")
        _print_tensor_info(info, pad)
    print(pad + f"Method name is: {signature.method_name}")


def _print_tensor_info(info, pad):
    if info.tensor_shape.unknown_rank:
        shape = "unknown_rank"
    else:
        shape = "(" + ", ".join(str(d.size) for d in info.tensor_shape.dim) + ")"
    print(pad + "      dtype: " + _DTYPE_NAMES[info.dtype])
    print(pad + "      shape: " + shape)
    print(pad + "      name: " + info.name)


def show_all(directory):
    saved = model.read_saved_model(directory)
    for meta in sorted(saved.meta_graphs, key=lambda m: list(m.meta_info_def.tags)):
        tags = ", ".join(meta.meta_info_def.tags)
        print(f"\nMetaGraphDef with tag-set: '{tags}' contains the following SignatureDefs:")
        for key in sorted(meta.signature_def):
            print(f"\nsignature_def['{key}']:")
            _print_signature(meta, meta.signature_def[key], 1)
