"""The ipu_keras tutorials, as notebooks with `.py` twins.

Each chapter is `NN_name.py` (the source, in jupytext's percent format: `# %%` starts a
code cell, `# %% [markdown]` a text cell whose lines are `# `-commented) and
`NN_name.ipynb`, built from it by `python tutorials/build.py` and committed without
outputs. Installed as the package `ipu_keras_tutorials`, so that `ipu-keras tutorials
--copy DIR` finds them in a wheel as in a source checkout.
"""
