"""Build the bundled tokenizer `agentsgym/tiny-chatml` (byte-level BPE, ChatML template).

Run from the repository root: `python scripts/build_default_tokenizer.py`. The output
is committed under core/src/agentsgym/assets/tiny-chatml/, so users never run this;
it is here so the files can be rebuilt and reviewed. Training is deterministic.
"""

from __future__ import annotations

import json
from pathlib import Path

from tokenizers import Tokenizer, decoders, models, pre_tokenizers, trainers

OUT = Path(__file__).resolve().parents[1] / "core/src/agentsgym/assets/tiny-chatml"
SPECIAL = ["<|endoftext|>", "<|im_start|>", "<|im_end|>"]
CHAT_TEMPLATE = (
    "{%- for message in messages %}"
    "{{- '<|im_start|>' + message['role'] + '\\n' + message['content'] + '<|im_end|>' + '\\n' }}"
    "{%- endfor %}"
    "{%- if add_generation_prompt %}{{- '<|im_start|>assistant\\n' }}{%- endif %}"
)

WORDS = """the a an is are was were be been of to in on for with by at from as it this that
these those you your we our they their he she his her its who what which where when why how
yes no maybe not and or but if then else so because guess number higher lower correct wrong
question questions answer answers word words letter letters first last start end begins ends
does do did is it a an place person thing category name city country animal object food tool
alphabet before after between more less than greater smaller equal length long short count
step steps turn turns left remaining game play player rules win lose score reward think
problem solution solve compute total sum difference product times divided plus minus each
apples oranges books coins dollars cents hours minutes days weeks price cost buys sells has
have had gives gets more fewer twice half third quarter percent percentage final boxed
system user assistant you are a helpful assistant please reply with only your answer
""".split()


def corpus() -> list[str]:
    lines = [" ".join(WORDS[i : i + 12]) for i in range(0, len(WORDS), 7)]
    lines += [f"Is the number between {a} and {b}? {a * 7 + b}" for a in range(0, 100, 3) for b in (10, 50, 99)]
    lines += [f"[{w}] Is it a {w}? Does it start with '{w[0]}'?" for w in WORDS]
    lines += ["0123456789 +-*/=()[]{}<>.,;:!?'\"\\ \n\t #### \\boxed{42} $x^2$ \\frac{1}{2}"] * 5
    return lines


def main() -> None:
    tokenizer = Tokenizer(models.BPE())
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    trainer = trainers.BpeTrainer(
        vocab_size=1024,
        special_tokens=SPECIAL,
        initial_alphabet=pre_tokenizers.ByteLevel.alphabet(),
        show_progress=False,
    )
    tokenizer.train_from_iterator(corpus(), trainer=trainer)
    OUT.mkdir(parents=True, exist_ok=True)
    tokenizer.save(str(OUT / "tokenizer.json"))
    config = {
        "tokenizer_class": "PreTrainedTokenizerFast",
        "bos_token": None,
        "eos_token": "<|im_end|>",
        "pad_token": "<|endoftext|>",
        "unk_token": None,
        "model_max_length": 32768,
        "clean_up_tokenization_spaces": False,
        "chat_template": CHAT_TEMPLATE,
    }
    (OUT / "tokenizer_config.json").write_text(json.dumps(config, indent=2) + "\n")
    print(f"wrote {OUT} (vocab {tokenizer.get_vocab_size()})")


if __name__ == "__main__":
    main()
