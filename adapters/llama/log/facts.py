"""What a llama-server log says about the server itself, as each build of the matrix
words it: its build, log verbosity, models, slots, context checkpoints, speculative
setup (or its refusal) and the target context's memory. `server_fact` notes one line's
fact into a `ServerInfo`.
"""

import re
from dataclasses import dataclass, field

_FACTS: tuple[tuple[str, re.Pattern[str]], ...] = tuple(
    (name, re.compile(p)) for name, p in (
        ("build", r"common_params_print_info: (build \d+ \(\w+\).*?)\s*$"),
        ("build", r"^(build: \d+ \(\w+\) with .*?)\s*$"),  # before 0.3.24, -v only
        ("build", r"^build_info: b(\d+)-([0-9a-f]+)\s*$"),  # 0.3.21
        # common_params_print_info (0.3.36), log_info (0.3.24, 0.3.30); none before
        ("verbosity", r"\w+: verbosity = (\d+) \(adjust"),
        ("loaded", r"(?:llama_server|main): (model loaded)"),  # main: before 0.3.24
        ("router", r"main: (starting router server)"),  # its children log behind `[pid]`
        ("model", r"load_model: loading model '(.*)'"),
        ("draft_model", r"loading draft model '(.*)'"),
        # Before 0.3.36 the slot length is not on this line.
        ("n_slots", r"initializing(?: slots)?, n_slots = (\d+)(?:, n_ctx_slot = (\d+))?"),
        ("ctx_checkpoints", r"context checkpoints enabled, max = (\d+)"),
        ("ctx_checkpoints", r"context checkpoints (disabled)"),
        ("implementation", r"adding speculative implementation '([\w-]+)'"),
        ("implementation", r"adding implementation ([\w-]+)"),  # before 0.3.24 (-v)
        ("model_drafter", r"creating (MTP) draft context"),
        ("model_drafter", r"common_speculative_state_mtp: (MTP) context ready"),  # ik_llama.cpp
        ("draft_n_max", r"^(?:spec\s+)?\S+: - (?:n_match=\d+, )?n_max=(\d+)"),
        ("spec_checkpoints", r"speculative decoding (will use checkpoints)"),
        ("spec_refused", r"speculative decoding (not supported by this context)"),  # 0.3.20
        ("n_rs_seq", r"llama_context: n_rs_seq\s+= (\d+)"),
        # The context's KV cells, and whether its slots share them (one pool for all).
        ("n_ctx", r"llama_context: n_ctx\s+= (\d+)"),
        ("kv_unified", r"kv_unified\s+= (true|false)"),
        # "graph: nodes = N" from 0.3.36, "graph nodes  = N" before
        ("graph_nodes", r"sched_reserve: graph:? nodes\s*= (\d+)"),
        ("loading", r"llama_model_loader: loaded meta data with .* from (.*) \(version"),
        # The target's shape (the lines after its file's metadata; 0.3.30 loads a draft
        # model's file first, to estimate its memory): what a never-run MTP head would cost.
        ("n_swa", r"print_info: n_swa\s+= (\d+)"),
        ("n_layer", r"print_info: n_layer\s+= (\d+)"),
        ("nextn_layers", r"\.nextn_predict_layers u32\s+= (\d+)"),
        ("block_count", r"\.block_count u32\s+= (\d+)"),  # the file's: nextn layers too
        ("attention_interval", r"\.full_attention_interval u32\s+= (\d+)"),
        ("n_embd", r"print_info: n_embd\s+= (\d+)"),
        ("n_vocab", r"print_info: n_vocab\s+= (\d+)"),
        ("model_params", r"print_info: model params\s+= ([\d.]+ [KMBT])"),
    )
)


_SHAPE = frozenset(("n_swa", "n_layer", "nextn_layers", "block_count", "attention_interval",
                    "n_embd", "n_vocab", "model_params"))
_FLAGS = frozenset(("spec_checkpoints", "spec_refused", "loaded", "router"))  # a line makes true
_TARGET_FIRST = frozenset(("n_ctx", "kv_unified"))  # the target's context prints them first
_LARGEST = frozenset(("n_rs_seq", "graph_nodes"))  # the largest of several lines counts


@dataclass
class ServerInfo:
    """What the log says about the server itself: its build line, its log verbosity
    (`verbose`: -v, every round shown), whether it finished loading (its speculative
    setup is logged before that), the model files it loaded, slots, context checkpoints
    (None: not logged; 0: disabled), the speculative implementations as the setup adds them
    (trace level: all of the chain, in llama-server's order of precedence) and the first
    one's draft length, the model drafters named at any level (an MTP context; a draft
    model is `draft_model`), whether verification restores checkpoints (FULL memory),
    whether the server refused speculation on this model (`spec_refused`: 0.3.20 on a
    hybrid target, whatever drafter was asked) and the target context's recurrent states
    per sequence (`n_rs_seq`, RS memory) and its forward graph's nodes (`graph_nodes`).
    Implementation names are llama.cpp's own (with underscores before 0.3.24)."""

    build: str | None = None
    verbosity: int | None = None
    loaded: bool = False
    model: str | None = None
    draft_model: str | None = None
    n_slots: int | None = None
    n_ctx_slot: int | None = None
    ctx_checkpoints: int | None = None
    implementations: list[str] = field(default_factory=list)
    model_drafters: list[str] = field(default_factory=list)
    draft_n_max: int | None = None
    spec_checkpoints: bool = False
    spec_refused: bool = False
    n_rs_seq: int | None = None
    graph_nodes: int | None = None
    """The nodes of the target's forward graph as its context reserves it: the largest
    graph the server reserves (a drafter's context, an MTP head or a smaller draft model,
    reserves a smaller one, before the target's in 0.3.24 and 0.3.30)."""
    n_ctx: int | None = None
    kv_unified: bool | None = None
    """The target context's KV cells and whether its slots share them as one pool
    (`kv_unified`, what `-np auto` picks): then one slot's long prompt leaves the others
    less room."""
    n_swa: int | None = None
    """The target's sliding window (0: none), which the prompt phase's checkpoint check
    subtracts from the common prefix."""
    n_layer: int | None = None
    nextn_layers: int | None = None
    block_count: int | None = None
    attention_interval: int | None = None
    n_embd: int | None = None
    n_vocab: int | None = None
    model_params: str | None = None
    """The target's shape as its load prints it: layers run per forward, MTP (`nextn`)
    layers beside them, the file's layers (both; 0.3.24's `n_layer` counts them too), every
    how many layers one is full attention (a hybrid's), width, vocabulary and parameter
    count (`2.00 M`)."""
    loading: str | None = None
    """The model file whose load the log is printing (None: before the first)."""
    router: bool = False
    """The process is a router (`--models`): it serves no request itself but starts a
    server process per model, whose lines it relays behind their `[pid]`."""
    structured_log: bool = False
    """The server logs with the structured logger (`INFO [ function] message | k=v`), as
    ik_llama.cpp does and llama.cpp did before its 2024 logger: its build number is not
    upstream's numbering of today."""

    def note(self, name: str, m: re.Match[str]) -> None:
        """Take one matched fact line (the first occurrence of each counts)."""
        value = m.group(1)
        if name in ("implementation", "model_drafter"):
            names = self.implementations if name == "implementation" else self.model_drafters
            value = "draft-mtp" if value == "MTP" else value
            if value not in names:
                names.append(value)
        elif name in _FLAGS:
            setattr(self, name, True)
        elif name == "build" and m.re.groups == 2:
            if self.build is None:  # the banner's own wording, as later builds print it
                self.build = f"build {value} ({m.group(2)})"
        elif name == "verbosity":
            self.verbosity = int(value)
        elif name in _TARGET_FIRST:
            if getattr(self, name) is None:
                setattr(self, name, value == "true" if name == "kv_unified" else int(value))
        elif name == "n_slots":
            if self.n_slots is None:
                self.n_slots = int(value)
                self.n_ctx_slot = int(m.group(2)) if m.group(2) is not None else None
        elif name == "ctx_checkpoints":
            if self.ctx_checkpoints is None:
                self.ctx_checkpoints = 0 if value == "disabled" else int(value)
        elif name in _LARGEST:
            # Every context prints them (0.3.24 a memory-fitting probe first, and the draft
            # context): the target's is the one with per-sequence states, and the largest
            # graph.
            setattr(self, name, max(getattr(self, name) or 0, int(value)))
        elif name == "loading":
            self.loading = value
        elif name in _SHAPE and self.loading not in (None, self.model):
            return  # another file's (a draft model's) shape
        elif getattr(self, name) is None:
            setattr(self, name, value if name in ("build", "model", "draft_model",
                                                   "model_params") else int(value))

    @property
    def recurrent_layers(self) -> int | None:
        """The target's recurrent layers: of the file's layers less its MTP ones, all but
        every `attention_interval`-th (None: the log does not print them)."""
        if self.block_count is None or not self.attention_interval:
            return None
        layers = self.block_count - (self.nextn_layers or 0)
        return layers - layers // self.attention_interval

    @property
    def verbose(self) -> bool | None:
        """Whether the server ran with -v, every round shown (None: its verbosity is not
        logged): -v sets the verbosity to INT_MAX, the default is 3."""
        return None if self.verbosity is None else self.verbosity > 4

    @property
    def spec_types(self) -> list[str]:
        """The speculative types the log names: the implementations the setup added (the
        whole chain, in order), else the model drafters it shows at any level (a part of
        the chain at most)."""
        if self.implementations:
            return list(self.implementations)
        drafters = list(self.model_drafters)
        if self.draft_model is not None and "draft-simple" not in drafters:
            drafters.append("draft-simple")
        return drafters


# With -v the server echoes each request and answer: client text, where only the answer's
# fingerprint is a fact (0.3.20 prints no build line: this names it).
_ECHO = re.compile(r"^srv\s+log_server_r: ")
_ECHO_FACTS = (("build", re.compile(r"^srv\s+log_server_r: response: .*\"system_fingerprint\":"
                                    r"\"b(\d+)-([0-9a-f]+)\"")),)


def server_fact(body: str, server: ServerInfo, serving: bool = False) -> bool:
    """Note a server-level fact found in `body`; whether there was one. A server that is
    serving prints none but the build in its answers' echo (-v), so only that is looked
    for then."""
    echo = _ECHO.match(body) is not None
    if serving and not echo:
        return False
    for name, pattern in _ECHO_FACTS if echo else _FACTS:
        m = pattern.search(body)
        if m is not None:
            server.note(name, m)
            return True
    return False
