"""`dpmmbench check`: the conformance, bad-input and exactness harness against one sampler.
It certifies an exact sampler, reports an approximate one's distance, and catches a sampler
that declares exact but weighs a new cluster wrongly (exit 1)."""
from __future__ import annotations

import pytest

from dpmmbench.algorithms import certify
from dpmmbench.algorithms.gibbs import CollapsedGibbs
from dpmmbench.workflows.cli import main

#: a small budget: the threshold is calibrated to it (coarser, never looser)
BUDGET = {"samples": 400, "chains": 6}


class TripledNewCluster(CollapsedGibbs):
    """Collapsed Gibbs whose new-cluster prior term alpha * m(x) is three times too large: a
    valid chain, of the wrong posterior, that still declares itself exact."""

    name = "tripled-new-cluster"

    def __init__(self, family, alpha=1.0, **kwargs):
        super().__init__(family, alpha=3.0 * alpha, **kwargs)


def test_an_exact_sampler_is_certified():
    cert = certify.certify("gibbs", **BUDGET)
    assert cert.passed and cert.verdict == "exact as declared"
    assert set(cert.exactness) == set(certify.PROBLEMS) and not cert.failures
    assert len(cert.findings) >= 3 + 12  # the contract per problem, then each bad input


def test_a_sampler_that_declares_exact_but_is_not_is_caught():
    cert = certify.certify(TripledNewCluster, **BUDGET)
    assert not cert.failures  # it conforms and refuses bad input: only its posterior is wrong
    assert not cert.passed and cert.verdict.startswith("declares exact but is not")
    assert cert.inexact and all(cert.exactness[p].tv > cert.exactness[p].threshold for p in cert.inexact)


def test_the_command_prints_the_certificate(capsys):
    assert main(["check", "gibbs", "--samples", "400", "--chains", "6"]) == 0
    out, err = capsys.readouterr()
    assert "verdict: exact as declared" in out and "chain 6/6" in err
    for problem in certify.PROBLEMS:
        assert f"  {problem}" in out and "threshold" in out
    assert main(["check", "fsd", "--samples", "400", "--chains", "6", "--no-progress"]) == 0
    out, err = capsys.readouterr()
    assert "verdict: not exact (declared approximate): distance" in out and err == ""


@pytest.mark.parametrize("argv, named", [
    (["check", "gibs"], "gibs"),
    (["check", "gibbs", "--samples", "10"], "samples >= 50"),
    (["check", "gibbs", "--chains", "1"], "chains >= 2"),
])
def test_bad_arguments_are_named(argv, named, capsys):
    assert main(argv) == 2
    assert named in capsys.readouterr().err
