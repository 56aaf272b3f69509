"""Our top-level packages are installed into the user's environment beside everyone
else's: a name that another installed distribution also ships shadows one of the two.
transformers 5.25 began to require the `kernels` distribution, which our `kernels`
package (now `speckernels`) shadowed, and every transformers import failed."""

import importlib.metadata
import tomllib
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]


def _our_packages() -> list[str]:
    found = tomllib.loads((ROOT / "pyproject.toml").read_text())["tool"]["setuptools"]
    return [pattern.rstrip("*") for pattern in found["packages"]["find"]["include"]]


def test_no_top_level_package_is_shipped_by_another_distribution() -> None:
    owners = importlib.metadata.packages_distributions()
    clashes = {name: owners[name] for name in _our_packages()
               if set(owners.get(name, [])) - {"specledger"}}
    assert not clashes, f"installed distributions also ship these top-level names: {clashes}"


def test_transformers_imports_beside_our_packages() -> None:
    from transformers import Qwen3_5ForCausalLM

    assert Qwen3_5ForCausalLM.__name__ == "Qwen3_5ForCausalLM"
