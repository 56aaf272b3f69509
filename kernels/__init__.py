"""kernels package."""
