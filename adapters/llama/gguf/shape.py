"""The target model's shape as a llama-server log prints it at load, and what it says
about a drafter the log never ran: the MTP head is one transformer layer (the `nextn`
block) and the shared LM head, run per drafted token at batch 1, where the target's
forward is its `n_layer` layers and the same head. Weights read per token stand for
the cost: a layer's are the parameters left after the embedding table and the head
(`n_vocab x n_embd` each), shared evenly by every layer the file holds."""

from dataclasses import dataclass

from adapters.llama.log.facts import ServerInfo

_SCALE = {"K": 1e3, "M": 1e6, "B": 1e9, "T": 1e12}


@dataclass(frozen=True)
class ModelShape:
    """Layers per forward, MTP layers beside them, width, vocabulary, parameters."""

    n_layer: int
    nextn_layers: int
    n_embd: int
    n_vocab: int
    params: float

    @property
    def head_params(self) -> float:
        """The LM head's weights (one per vocabulary entry and width)."""
        return float(self.n_vocab * self.n_embd)

    @property
    def layer_params(self) -> float:
        """One layer's weights: what is left after the embedding table and the head,
        over every layer the file holds (the MTP layers too)."""
        return max(self.params - 2 * self.head_params, 0.0) / (self.n_layer + self.nextn_layers)

    def mtp_share(self) -> float:
        """The MTP head's cost per drafted token as a share of a batch-1 target forward:
        one layer and the head over `n_layer` layers and the head."""
        return (self.layer_params + self.head_params) / (
            self.n_layer * self.layer_params + self.head_params)

    def describe(self) -> str:
        """Where the share comes from, in words."""
        head = self.head_params / self.layer_params if self.layer_params else float("inf")
        return (f"from the model's shape: 1 of {self.n_layer} layers + the head "
                f"({head:.2f} of a layer's weights): {100 * self.mtp_share():.1f}% of the "
                "target's forward")


def model_shape(server: ServerInfo) -> ModelShape | None:
    """The target's shape from its load lines; None where the log does not print it all
    or the model has no MTP layer."""
    s = server
    if not (s.n_layer and s.nextn_layers and s.n_embd and s.n_vocab and s.model_params):
        return None
    number, unit = s.model_params.split()
    return ModelShape(n_layer=s.n_layer, nextn_layers=s.nextn_layers, n_embd=s.n_embd,
                      n_vocab=s.n_vocab, params=float(number) * _SCALE[unit])
