"""Seeded hostile markdown: what an agent could send to break out of our escaping.

Input ``i`` of seed ``s`` is built from ``random.Random(f"{s}:{i}")`` alone, so
any one input can be made again from its seed and index (``case(s, i)``). It
mixes pieces JupyterLab's pipeline treats specially: its math pass
(``$``, ``$$``, ``\\(`` ``\\)`` ``\\[`` ``\\]``, ``\\begin{..}``, ``@@0@@``
placeholders), marked's code spans and fences (in block quotes with ``>``
blank lines, in lists), raw HTML that would run, entities, links and images
with bad schemes, backslash escapes, tables, and line breaks everywhere.
"""

from __future__ import annotations

import random

#: What a payload does if it runs: records itself (no navigation, no dialogs).
RUN = "__acp_pwned.push(1)"

MATH = [
    "$", "$", "$$", "\\$", "\\\\$", "$x$", "$$x$$", "$a_1$", "\\(", "\\)", "\\\\(", "\\\\)", "\\[", "\\]",
    "\\\\[", "\\\\]", "\\begin{x}", "\\end{x}", "\\begin{align}", "\\end{align}", "\\begin{equation*}",
    "\\style{background-color:red}{x}", "\\href{javascript:" + RUN + "}{m}", "\\unicode{60}", "\\{", "\\}",
    "{", "}", "$\\$$", "\\text{<b>}", "\\class{jp-Dialog}{x}", "\\cssId{x}{y}",
]
CODE = ["`", "`", "``", "```", "````", "~~~", "`a`", "`a\nb`", "``a`b``", "` `", "```js\n", "~~~\n"]
HTML = [
    "<img src=x onerror=" + RUN + ">", "<img\nsrc=x\nonerror=" + RUN + ">", "<svg onload=" + RUN + ">",
    "<svg><script>" + RUN + "</script></svg>", "<script>" + RUN + "</script>", "<script>",
    "<iframe srcdoc='<b>x</b>'></iframe>", "<a href=\"javascript:" + RUN + "\">a</a>", "<a href=javascript:x>",
    "<details open ontoggle=" + RUN + ">", "<style>*{color:red}</style>", "<form action=x><input name=q>",
    "<math><mi>x</mi></math>", "<!-- c -->", "<!--", "-->", "<?x?>", "<![CDATA[x]]>", "<div>", "</div>",
    "<b>", "</b>", "<x-y onclick=" + RUN + ">", "<span style=\"position:fixed;top:0\">s</span>", "<p>", "<br>",
    "<object data=x></object>", "<embed src=x>", "<meta name=x>", "<link rel=stylesheet href=x>",
    "<input autofocus onfocus=" + RUN + ">", "<video src=x onerror=" + RUN + ">", "<code>", "</code>", "<pre>",
    "</pre>", "<", ">", "</", "<a", "<img", " onerror=" + RUN, "=",
]
ENTITY = ["&lt;", "&gt;", "&#x3C;", "&#60;", "&amp;lt;", "&#x24;", "&#36;", "&#92;", "&bsol;", "&dollar;",
          "&grave;", "&#96;", "&amp;", "&", "&#x3c;img src=x onerror=" + RUN + "&#x3e;", "&quot;", "&#0;"]
LINK = [
    "[x](javascript:" + RUN + ")", "[x](<javascript:" + RUN + ">)", "[x](JaVaScRiPt:" + RUN + ")",
    "[x](java\tscript:" + RUN + ")", "[x](data:text/html,<script>" + RUN + "</script>)",
    "[x](http://example.com/a_b)", "[x](http://a.b \"t\")", "[x][r]", "\n\n[r]: javascript:" + RUN + "\n",
    "![a](http://127.0.0.1:9/x.png)", "![a](javascript:" + RUN + ")", "![a](data:image/png;base64,AAAA)",
    "![a](x.png)", "<javascript:" + RUN + ">", "<http://a.b/c>", "<a@b.c>", "http://a.b/$x$", "www.a.b",
    "javascript://%0A" + RUN, "www.a.b`", "http://b`", "x@y.z`", "[](svg/onload=" + RUN + ")", "[", "]", "(", ")", "![", "](", "[x]:", "[^1]", "[ ] ", "[x] ",
]
PLACEHOLDER = ["@@0@@", "@@1@@", "@@12@@", "@@", "@@0@@@@1@@"]
ESCAPE = ["\\", "\\\\", "\\`", "\\<", "\\*", "\\_", "\\[", "\\]", "\\&", "\\|", "\\\n", "\\$"]
WORD = ["a", "x", "Try", "then", " ", " ", "  ", "\n", "\n", "\n\n", "\t", "*", "_", "**", "~~", "|", "#", "-",
        "1.", "'", '"', ":", "é", "\u00a0", "\u200b", "\r", "\r\n"]
TABLE = ["| a | b |\n| - | - |\n| $x$ | `c` |\n", "a | b\n--|--\n", "| `x|y` | <b> |\n", "|-|\n"]
LEAD = ["> ", ">", "> > ", "- ", "* ", "1. ", "    ", "\t", "# ", "- > ", "> - ", "  ", ""]
FENCE_BLOCKS = [
    "```\n{body}\n```", "> ```\n> {body}\n>\n> ```", "- ```\n  {body}\n  ```", "~~~\n{body}\n~~~",
    "> ~~~\n>\n> {body}\n> ~~~", "```\n{body}", "    {body}", "> ```\n{body}\n```",
]

POOLS = [(MATH, 5), (CODE, 4), (HTML, 4), (ENTITY, 1), (LINK, 3), (PLACEHOLDER, 1), (ESCAPE, 2), (WORD, 6),
         (TABLE, 1)]
_WEIGHTED = [pool for pool, weight in POOLS for _ in range(weight)]


def _pieces(rng: random.Random, n: int) -> str:
    return "".join(rng.choice(rng.choice(_WEIGHTED)) for _ in range(n))


def case(seed: int | str, index: int) -> str:
    """Input ``index`` of ``seed``: the same text every time."""
    rng = random.Random(f"{seed}:{index}")
    text = _pieces(rng, rng.randint(1, 14))
    shape = rng.random()
    if shape < 0.25:  # a fence (in a quote, a list) with hostile content around and inside
        body = _pieces(rng, rng.randint(1, 8))
        text = _pieces(rng, rng.randint(0, 4)) + "\n" + rng.choice(FENCE_BLOCKS).replace("{body}", body) + \
            "\n" + _pieces(rng, rng.randint(0, 4))
    if shape > 0.6:  # block structure: each line gets a lead (quote, list, indent, heading)
        text = "\n".join(rng.choice(LEAD) + line for line in text.split("\n"))
    if rng.random() < 0.1:
        text = text + "\n" + case(seed, index + 1_000_000_007)[:200]
    return text


def cases(seed: int | str, start: int, count: int) -> list[str]:
    return [case(seed, i) for i in range(start, start + count)]
