"""The device description shared by the compiler and the simulator: the targets (`targets`),
the cost model that turns work into cycles (`cost`) and the executable format the
compiler writes and the engine runs (`executable`, its typed steps and blocks in `steps`)."""
