"""The chat template the observed engines get: the ChatML of `engine.template`, in the Jinja
form their servers render. The shipped checkpoints have no tokenizer_config.json, hence no
template of their own: llama.cpp reads this one from the GGUF export (adapters/llama/
convert.py), vLLM from a file named by `--chat-template` (adapters/vllm/server.py)."""

CHATML_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)
