"""Installed into vLLM's environment (not imported by specledger): lets the registry's
torchvision import beside the CPU torch.

vLLM's Qwen3.5 model imports its Qwen3-VL code, which imports transformers' Qwen2-VL image
processor, which imports `torchvision.transforms.v2`. The only torchvision release for
torch 2.13 on the registry (0.28.0) is a CUDA build: its C++ extension links libtorch_cuda
and cannot load. torchvision tolerates that (its ops then raise when used) except for two
unguarded `register_fake` calls, which need the `torchvision::nms` and `torchvision::qnms`
schemas to exist. This declares those two schemas, without kernels, just before torchvision
is first imported. Text models never call them; a detection model calling nms would get
torch's "no kernel" error. tools/install_vllm.sh installs it only where `import torchvision`
fails with "operator torchvision::nms does not exist", so it never meets a torchvision whose
extension defines the same schemas.
"""

import sys
from importlib.abc import MetaPathFinder
from importlib.machinery import ModuleSpec
from typing import Any

_LIBRARIES: list[Any] = []  # a torch Library drops its definitions when collected
_SCHEMAS = (
    "nms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
    "qnms(Tensor dets, Tensor scores, float iou_threshold) -> Tensor",
)


class _DeclareBeforeTorchvision(MetaPathFinder):
    """Runs once, on the first `import torchvision`, then steps aside for the real finder."""

    def find_spec(self, name: str, path: Any = None, target: Any = None) -> ModuleSpec | None:
        if name != "torchvision":
            return None
        sys.meta_path.remove(self)
        import torch

        library = torch.library.Library("torchvision", "FRAGMENT")
        for schema in _SCHEMAS:
            library.define(schema)
        _LIBRARIES.append(library)
        return None


sys.meta_path.insert(0, _DeclareBeforeTorchvision())
