"""The differential fuzz in CI: generated hostile agent text, every output acp_kernel
builds from it, JupyterLab's renderers, and nothing live.

Sizes: ``ACP_FUZZ_INPUTS`` inputs (default :data:`CI_INPUTS`; the nightly run
sets ``ACP_FUZZ_INPUTS=100000``), seed ``ACP_FUZZ_SEED`` (default: a fixed
one, so a CI failure is the same on a laptop). A failure names the seed and
index of each failing input and a minimal input that fails the same way
(also appended to ``/tmp/rendermime-findings.txt``)::

    ACP_FUZZ_INPUTS=100000 ACP_FUZZ_SEED=$(date +%F) \\
        python -m pytest tests/rendermime/test_fuzz.py -n 0 -q -p no:randomly --timeout 0
"""

from __future__ import annotations

import os

import pytest

from .fuzz import fuzz, shrink_some

#: Inputs in a CI run: about 2 minutes on a 2-core machine under a load of 13
#: (other test runs); the renderers take most of it (about 10 renders an input).
CI_INPUTS = 2000
INPUTS = int(os.environ.get("ACP_FUZZ_INPUTS", "") or CI_INPUTS)
SEED = os.environ.get("ACP_FUZZ_SEED", "") or "ci-2026"


@pytest.mark.slow
@pytest.mark.xdist_group("rendermime")
@pytest.mark.timeout(max(900, INPUTS // 5))
def test_no_live_output_from_generated_agent_text(oracle, safe_module) -> None:
    report = fuzz(oracle, safe_module, SEED, INPUTS)
    print(report.summary())
    assert report.rendered > INPUTS  # every input rendered at least once (most several times)
    if report.failures or report.pwned:
        shown = shrink_some(oracle, safe_module, report, per_kind=1)
        pytest.fail(report.summary() + "\n\n" + "\n\n".join(f.report(SEED) for f in shown), pytrace=False)
