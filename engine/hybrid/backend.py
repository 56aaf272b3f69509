"""The `torch` backend: the hybrid model behind `engine.backend.Backend`, on the wall
clock. Rollback strategies map onto the state's own operations (snapshot/restore,
per-position states, recorded GDN inputs); the resolved kernel backend is passed to each
operation that runs a kernel, never set on the (possibly shared) model."""

import hashlib
import time
from collections.abc import Sequence
from weakref import WeakKeyDictionary

import torch
from tokenizers import Tokenizer

from engine.backend import UBATCH, Capabilities, Keep, VerifyOut
from engine.config import RunConfig
from engine.errors import BackendError
from engine.hybrid.compiled import decode_step
from engine.hybrid.device import resolve_device, synchronize, torch_dtype
from engine.hybrid.loader import LoadedCheckpoint, load_checkpoint
from engine.hybrid.pool import enlarged
from engine.hybrid.state import HybridState, RecordedInputs, StateSnapshot, TokenStates
from engine.model_digest import checkpoint_digest
from engine.sampling import SamplingParams, greedy_targets, verify_targets
from engine.speculative import common_prefix
from engine.template import ChatTemplate
from fsm.invariants import Audit
from speckernels.backend import resolve_backend

# Relative state error the audit accepts, by model dtype. A stray token makes ~1 (median
# 2.5 on the shipped models); a true state differs from its one-token-at-a-time twin by
# batch-shape rounding: ~1e-6 in float32, up to 0.026 in bfloat16 (measured over 2-turn
# sessions of shipped:target, every rollback strategy).
AUDIT_TOLERANCE = {torch.float32: 1e-3, torch.bfloat16: 0.1}


def template_for(tok: Tokenizer) -> ChatTemplate:
    """The ChatML template in this tokenizer's ids."""
    ids = {name: tok.token_to_id(name) for name in ("<|im_start|>", "<|im_end|>",
                                                    "<|endoftext|>")}
    missing = [name for name, i in ids.items() if i is None]
    if missing:
        raise BackendError(f"the tokenizer lacks the chat specials {', '.join(missing)}")

    def enc(text: str) -> tuple[int, ...]:
        return tuple(tok.encode(text, add_special_tokens=False).ids)

    return ChatTemplate(im_start=ids["<|im_start|>"], im_end=ids["<|im_end|>"],
                        end_of_text=ids["<|endoftext|>"], nl=enc("\n"), user=enc("user"),
                        assistant=enc("assistant"))


def state_digest(state: HybridState) -> str:
    """sha256 of the position and the recurrent + conv state (the part that cannot be
    trimmed; the KV cache is positional and checked by length)."""
    h = hashlib.sha256(f"position={state.position}".encode())
    for t in (*state.recurrent, *state.conv):
        # hashed in place on the CPU (.cpu() is then the tensor itself); a GPU's is copied
        h.update(t.contiguous().cpu().view(torch.uint8).numpy())
    return h.hexdigest()[:16]


class _LastHidden:
    """The final norm's output of the model's latest forward."""

    def __init__(self) -> None:
        self.out: torch.Tensor | None = None

    def keep(self, _module: object, _args: object, out: torch.Tensor) -> None:
        """Forward hook on the final norm."""
        self.out = out


_HOOKED: WeakKeyDictionary[torch.nn.Module, _LastHidden] = WeakKeyDictionary()


def _last_hidden(model: torch.nn.Module) -> _LastHidden:
    """One hook per model, shared by every backend built on it (a benchmark builds many
    backends over one loaded checkpoint; a hook each would pile up on the module)."""
    box = _HOOKED.get(model)
    if box is None:
        box = _HOOKED[model] = _LastHidden()
        model.norm.register_forward_hook(box.keep)
    return box


class TorchBackend:
    """Real forwards over a loaded checkpoint (`config.model`)."""

    name = "torch"
    clock = "wall"

    def __init__(self, config: RunConfig, checkpoint: LoadedCheckpoint | None = None) -> None:
        # A checkpoint handed in (shared by many backends) is used where it lies.
        ckpt = checkpoint or load_checkpoint(config.model, dtype=torch_dtype(config.dtype),
                                             device=resolve_device(config.device))
        if ckpt.tokenizer is None:
            raise BackendError(f"{ckpt.path} has no tokenizer.json; the torch backend needs one")
        self.checkpoint = ckpt
        self.model = ckpt.model.eval()
        self.device = self.model.embed_tokens.weight.device
        if self.model.dtype not in AUDIT_TOLERANCE:
            raise BackendError(f"{ckpt.path} is loaded in {self.model.dtype}; the torch backend "
                               f"runs float32 or bfloat16 (--dtype)")
        self._tolerance = AUDIT_TOLERANCE[self.model.dtype]
        try:
            self.kernels = resolve_backend(config.kernels, self.device)
        except RuntimeError as exc:
            raise BackendError(f"kernels: {exc}") from None
        self.template = template_for(ckpt.tokenizer)
        self.params = SamplingParams(config.temperature, config.top_k, config.top_p)
        self.gen = torch.Generator().manual_seed(config.seed)
        self.compiled = config.compile
        self._bytes = self.model.new_state().state_bytes
        # Per live state, dropped with it: the audit twin and the hidden-state history.
        self._audits: WeakKeyDictionary[HybridState, tuple[HybridState, list[int]]] = (
            WeakKeyDictionary())
        # The final norm's output, kept per state and position for drafters that read the
        # target's hidden states (MTP); written after every forward over a batch.
        self._last = _last_hidden(self.model)
        self._hidden: WeakKeyDictionary[HybridState, torch.Tensor] = WeakKeyDictionary()
        self._t0 = time.perf_counter()
        self.capabilities = Capabilities(
            oracle=self, hidden_states=self.hidden_states, model_digest=self.model_digest,
            verify_batch=self.verify_batch,
            resolved={"kernels": self.kernels.value, "device": self.device.type})

    def model_digest(self) -> str:
        """sha256 over the checkpoint's config and weight files: a re-execution can refuse
        a different model."""
        return checkpoint_digest(self.checkpoint.path)

    def now(self) -> float:
        """Wall seconds since the backend was built, once the device's queued work is
        done (so an event's duration is the work's, not its launch's)."""
        synchronize(self.device)
        return time.perf_counter() - self._t0

    def state_bytes(self) -> int:
        """Bytes of one recurrent + conv state."""
        return self._bytes

    def new_state(self) -> HybridState:
        """An empty state."""
        return self.model.new_state()

    def reset(self, state: HybridState) -> None:
        """Back to position 0."""
        state.reset()

    def _store_hidden(self, state: HybridState, start: int) -> None:
        """File the last forward's hidden states (1, T, H) at positions start.."""
        if self._last.out is not None:
            self._file_hidden(state, start, self._last.out[0])

    def _file_hidden(self, state: HybridState, start: int, h: torch.Tensor) -> None:
        """File hidden states h (T, H) at the state's positions start..start+T-1."""
        length = h.shape[0]
        buf = self._hidden.get(state)
        if buf is None or buf.shape[0] < start + length:
            old = h.new_zeros(0, h.shape[-1]) if buf is None else buf
            buf = self._hidden[state] = enlarged(old, max(2 * (start + length), 256), h.shape[-1])
        buf[start:start + length] = h

    def hidden_states(self, state: HybridState, start: int, end: int) -> torch.Tensor:
        """The target's final hidden states at positions start..end-1 (end <= position):
        hidden[i] is the output at token i, the one that predicted token i + 1."""
        if not 0 <= start <= end <= state.position:
            raise BackendError(f"hidden states {start}..{end} are not all consumed "
                               f"(position {state.position})")
        return self._hidden[state][start:end]

    def _ids(self, tokens: Sequence[int]) -> torch.Tensor:
        return torch.tensor([list(tokens)], dtype=torch.long, device=self.device)  # (1, T)

    def _targets(self, logits: torch.Tensor, drafts: list[int]) -> list[int]:
        """Verification targets from logits (T, V). The seeded generator lives on the CPU,
        so sampled verification reads the logits there; greedy stays on the device."""
        if not self.params.greedy:
            logits = logits.float().cpu()
        return verify_targets(logits, drafts, None, self.params, self.gen)

    def _consume(self, state: HybridState, tokens: Sequence[int]) -> torch.Tensor:
        """Run `tokens` in chunks; the last position's logits (V,)."""
        logits = None
        for i in range(0, len(tokens), UBATCH):
            start = state.position
            # Full logits, not last_only: the vocabulary is small and drafters may read
            # every position's hidden state.
            logits = self.model.forward(self._ids(tokens[i:i + UBATCH]), state)[:, -1:]
            self._store_hidden(state, start)
        if logits is None:
            raise BackendError("prefill of an empty prompt")
        return logits[0, -1]

    def prefill(self, state: HybridState, tokens: Sequence[int]) -> int:
        """Consume the prompt in chunks; return the next token."""
        return self._targets(self._consume(state, tokens)[None], [])[0]

    def verify(self, state: HybridState, batch: Sequence[int], keep: Keep) -> VerifyOut:
        """One forward over [last committed, drafts...], keeping what `keep` says."""
        start, kept = state.position, None
        if self.compiled and keep is Keep.NOTHING and len(batch) == 1:  # a plain decode step
            logits, hidden = decode_step(self.model, self._ids(batch), state)  # (1, 1, V)
            self._file_hidden(state, start, hidden[0])
            logits = logits[0]
        else:
            logits, (kept,) = self.model.verify_rows([batch], [state], [keep], self.kernels)
            self._store_hidden(state, start)
        return VerifyOut(self._targets(logits, list(batch[1:])), kept)

    def verify_batch(self, states: Sequence[HybridState], batches: Sequence[Sequence[int]],
                     keeps: Sequence[Keep]) -> list[VerifyOut]:
        """Every row's verify in one forward (`HybridModel.verify_rows`); row i's targets,
        kept data, state and hidden states are those `verify(states[i], batches[i],
        keeps[i])` gives, sampled in row order from the one generator."""
        if not len(states) == len(batches) == len(keeps):
            raise BackendError(f"verify_batch takes one batch and one keep per state; got "
                               f"{len(states)} states, {len(batches)} batches and "
                               f"{len(keeps)} keeps")
        if len(states) <= 1:  # one row is one verify: the same forward, bit for bit
            return [self.verify(*row) for row in zip(states, batches, keeps, strict=True)]
        starts = [s.position for s in states]
        logits, kept = self.model.verify_rows(batches, states, keeps, self.kernels)  # (N, V)
        hidden = self._last.out  # (1, N, H), the final norm's output of that forward
        # Greedy targets of every row in one argmax (one device sync, not one a row).
        greedy = logits.argmax(dim=-1).tolist() if self.params.greedy else None
        outs, end = [], 0
        for i, (state, start, batch) in enumerate(zip(states, starts, batches, strict=True)):
            begin, end = end, end + len(batch)
            if hidden is not None:
                self._file_hidden(state, start, hidden[0, begin:end])
            targets = (greedy[begin:end] if greedy is not None
                       else self._targets(logits[begin:end], list(batch[1:])))
            outs.append(VerifyOut(targets, kept[i]))
        return outs

    def forward(self, state: HybridState, tokens: Sequence[int]) -> list[int]:
        """A replay forward; the greedy token after each position."""
        start = state.position
        logits = self.model.forward(self._ids(tokens), state)[0]
        self._store_hidden(state, start)
        return greedy_targets(logits)

    def snapshot(self, state: HybridState) -> StateSnapshot:
        """Copy the recurrent + conv state."""
        return state.snapshot()

    def restore(self, state: HybridState, snap: StateSnapshot) -> None:
        """Copy a snapshot back; the KV cache trims to its position."""
        state.restore(snap)

    def select(self, state: HybridState, kept: TokenStates, index: int) -> None:
        """`per_token` commit."""
        state.select(kept, index, self.kernels)

    def replay_inputs(self, state: HybridState, kept: RecordedInputs, n: int) -> None:
        """`input_replay` commit."""
        state.replay_inputs(kept, n, self.kernels)

    def trim(self, state: HybridState, position: int) -> None:
        """KV only; the recurrence keeps what it absorbed."""
        state.trim(position)

    def kv_length(self, state: HybridState) -> int:
        """Valid KV entries (the state keeps them equal to its position)."""
        return state.position

    def digest(self, state: HybridState) -> str:
        """Digest of the recurrent + conv state."""
        return state_digest(state)

    def audit(self, state: HybridState, tokens: Sequence[int]) -> Audit:
        """Compare with a twin state fed the committed tokens one at a time. The twin is
        kept per slot state and only ever extended, unless the history was rewritten."""
        tokens = tokens[:state.position]
        twin, seen = self._audits.get(state, (None, []))
        keep = common_prefix(seen, tokens)
        if twin is None or keep < len(seen):
            twin, seen, keep = self.model.new_state(), [], 0
            if len(tokens) > 1:  # rebuild the prompt part in chunks, then go one by one
                self._consume(twin, tokens[:-1])
                seen, keep = list(tokens[:-1]), len(tokens) - 1
        for tok in tokens[keep:]:
            self.model.forward(self._ids([tok]), twin)
            seen.append(tok)
        self._audits[state] = (twin, seen)
        error = state.diff(twin) if state.position == twin.position else float("inf")
        return Audit(ok=error <= self._tolerance, expected_digest=state_digest(twin),
                     error=error)

    def continuation(self, state: HybridState, last: int, n: int) -> list[int]:
        """The greedy continuation, one look-ahead forward per token."""
        batch = [last]
        for _ in range(n):
            batch.append(self.peek(state, batch)[-1])
        return batch[1:]

    def peek(self, state: HybridState, tokens: Sequence[int]) -> list[int]:
        """Greedy targets after `tokens` without advancing the state."""
        logits, _ = self.model.verify_rows([tokens], [state], [Keep.INPUTS])
        return greedy_targets(logits)
