"""What the stub chat endpoint answers: arithmetic solved from the last user message, and a
tokenizer stand-in for the `usage` counts.

The question may say "What is 17 * 23?", "17x23" or "17 times 23", with +, -, *, / on integers
and decimals; the answer is just the number. Anything else gets a short fixed reply.
"""

from __future__ import annotations

import itertools
import re
from decimal import Context, Decimal
from fractions import Fraction
from typing import Any

from server_stub.llm_behaviour import Outcome

_NUMBER = r"-?(?:\d+(?:\.\d+)?|\.\d+)"
_OPERATOR = r"\*|×|x|\+|-|−|/|÷|plus|minus|times|multiplied\s+by|divided\s+by|over"
_ARITHMETIC = re.compile(
    rf"(?P<a>{_NUMBER})\s*(?P<op>{_OPERATOR})\s*(?P<b>{_NUMBER})", re.IGNORECASE
)
_OPERATORS: dict[str, str] = {
    "*": "*", "×": "*", "x": "*", "times": "*", "multiplied by": "*",
    "+": "+", "plus": "+",
    "-": "-", "−": "-", "minus": "-",
    "/": "/", "÷": "/", "divided by": "/", "over": "/",
}  # fmt: skip
_TOKEN = re.compile(r"\w+|[^\w\s]")
#: A streamed reply comes in at most this many content chunks.
STREAM_PIECES = 4
FALLBACK_REPLY = "I am the osmosis stub model. Ask me arithmetic, e.g. 'What is 17 * 23?'"
WRONG_FALLBACK_REPLY = "I am not sure."


def solve_arithmetic(text: str) -> Fraction | None:
    """The value of the last `a <op> b` in `text`; None if there is none or b is a zero divisor.

    The last match wins so that a preamble such as "Question 2:" cannot be taken for operands.
    """
    matches = list(_ARITHMETIC.finditer(text))
    if not matches:
        return None
    match = matches[-1]
    a, b = Fraction(match["a"]), Fraction(match["b"])
    op = _OPERATORS[re.sub(r"\s+", " ", match["op"].lower())]
    if op == "*":
        return a * b
    if op == "+":
        return a + b
    if op == "-":
        return a - b
    return None if b == 0 else a / b


def format_number(value: Fraction) -> str:
    """Integers print as such; other values as plain decimals, rounded to 10 places."""
    if value.denominator == 1:
        return str(value.numerator)
    # A generous precision so the quantize below never overflows for large operands.
    context = Context(prec=80)
    quotient = context.divide(Decimal(value.numerator), Decimal(value.denominator))
    rounded = quotient.quantize(Decimal("1e-10"), context=context).normalize(context)
    return format(rounded, "f")


def text_of(content: Any) -> str:
    """The text of an OpenAI message `content`: a string, or a list of typed parts."""
    if isinstance(content, str):
        return content
    if isinstance(content, list):
        return " ".join(
            str(part.get("text", "")) for part in content if isinstance(part, dict)
        ).strip()
    return ""


def count_tokens(text: str) -> int:
    """Words and punctuation marks: a plausible stand-in for a tokenizer."""
    return len(_TOKEN.findall(text))


def stream_pieces(text: str, most: int = STREAM_PIECES) -> list[str]:
    """`text` cut at token starts into at most `most` pieces of about as many tokens each.

    The pieces join back to `text` exactly, whitespace included; a text of one token or none
    is one piece.
    """
    starts = [match.start() for match in _TOKEN.finditer(text)]
    per_piece = -(-len(starts) // most)  # ceiling division
    cuts = [0, *starts[per_piece::per_piece], len(text)] if per_piece else [0, len(text)]
    return [text[begin:end] for begin, end in itertools.pairwise(cuts)]


def reply_for(messages: list[Any], outcome: Outcome, delta: int) -> str:
    question = _last_user_text(messages)
    value = solve_arithmetic(question)
    if value is None:
        if _ARITHMETIC.search(question):  # a division by zero
            return "0" if outcome == "wrong" else "undefined"
        return WRONG_FALLBACK_REPLY if outcome == "wrong" else FALLBACK_REPLY
    return format_number(value + delta if outcome == "wrong" else value)


def _last_user_text(messages: list[Any]) -> str:
    for message in reversed(messages):
        if isinstance(message, dict) and message.get("role") == "user":
            return text_of(message.get("content"))
    return ""
