"""Train the shipped models (target + MTP head, draft) on the Python standard library and
evaluate them; or, with --eval-only, evaluate the models already in --out.

    python tools/train.py --out engine/shipped --minutes 30 --seed 0
"""

import argparse
import json
import os
import time
from pathlib import Path

# Sleeping, not spinning, OpenMP workers: on a shared machine two spinning threads on two
# busy cores made a training step 15x slower. Must be set before torch starts OpenMP.
os.environ.setdefault("OMP_WAIT_POLICY", "PASSIVE")

from engine.hybrid import load_checkpoint
from engine.hybrid.mtp import load_mtp
from engine.training.configs import ModelFamily, train_config
from engine.training.evaluate import evaluate
from engine.training.train import save, train


def main(argv: list[str] | None = None) -> int:
    """Parse arguments, train unless --eval-only, evaluate and write eval.json."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--out", type=Path, default=Path("engine/shipped"))
    parser.add_argument("--minutes", type=float, default=30.0,
                        help="wall-clock budget of the whole training (default 30); the "
                             "wide family runs fixed step counts instead")
    parser.add_argument("--seed", type=int, default=0)
    parser.add_argument("--family", choices=[f.value for f in ModelFamily],
                        default=ModelFamily.DEFAULT.value,
                        help="model shapes: default, or wide (heads vLLM's CPU kernels take)")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--eval-only", action="store_true",
                        help="skip training; evaluate the models in --out")
    parser.add_argument("--eval-turns", type=int, default=200,
                        help="held-out turns for the <|im_end|> rate (default 200)")
    args = parser.parse_args(argv)

    def log(message: str) -> None:
        print(f"{time.strftime('%H:%M:%S')} {message}", flush=True)

    target_dir, draft_dir = args.out / "target", args.out / "draft"
    if not args.eval_only:
        config = train_config(ModelFamily(args.family), seed=args.seed, minutes=args.minutes,
                              threads=args.threads)
        trained = train(config, log)
        save(trained, args.out, config)
        log(f"trained in {trained.wall_s:.0f}s; saved to {args.out}")
    target = load_checkpoint(target_dir).model
    draft = load_checkpoint(draft_dir).model
    mtp = load_mtp(target_dir, target)
    started = time.monotonic()
    results = evaluate(target, draft, mtp, turns=args.eval_turns, seed=args.seed)
    results["eval_seconds"] = round(time.monotonic() - started, 1)
    (target_dir / "eval.json").write_text(json.dumps(results, indent=2) + "\n")
    log(json.dumps(results))
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
