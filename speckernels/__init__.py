"""Triton kernels for Gated DeltaNet state in speculative decoding, with torch references.

Use ``speckernels.ops`` (importable without triton or a GPU):

- ``gdn_verify``: gated delta rule over a verify batch, keeping every position's state
  (``per_token``), with deferred commit or commit into a chosen slot;
- ``gdn_commit``: gather the accepted position's recurrent state and conv window into the
  live slots, whole batch (and optionally all layers) in one launch; -1 rows skipped;
- ``gdn_replay`` / ``conv_replay``: ``input_replay`` commit over the accepted prefix only;
- ``conv_update``: causal depthwise conv1d (+SiLU) over several positions, keeping windows.

``speckernels.reference`` holds the torch references; ``speckernels.backend`` the one switch
(``KernelBackend``: auto, triton, torch). Kernel modules import triton and are loaded lazily.
"""
