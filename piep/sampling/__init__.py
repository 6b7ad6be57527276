"""GPU side: the reference runner, energy windows and the grid runner (imports torch)."""
