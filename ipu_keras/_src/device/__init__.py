"""The device description shared by the compiler and the simulator: the targets (`targets`),
the cost model that turns work into cycles (`cost`), the executable format the
compiler writes and the engine runs (`executable`, its typed steps and blocks and the
cycle kinds in `steps`), and the user's options for the device (`config`: `IPUConfig`
and the active config)."""
