"""What every peer shares (docs/design.md "Peers")."""
from __future__ import annotations

from abc import abstractmethod
from typing import ClassVar

from ..base import Sampler
from ..constraints import RUN_DEFAULTS
from ..state import State


class Peer(Sampler):
    """A method of another library behind the sampler contract.

    Not exact (its stationary law, if it has one, is not checked against the enumerated
    posterior), external, and unable to learn alpha under the suite's Gamma prior unless it
    says otherwise: a run that asks for that is refused when the peer is built rather than
    run under another prior. A peer starts from its own initialisation (recorded in its
    :meth:`settings`): ``init`` checks ``init_clusters`` but refuses a given partition, unless
    the peer starts from the suite's partition (``starts_from_partition``).
    """

    exact = False
    external = True
    #: the peer learns alpha under the suite's ``alpha_prior``
    learns_alpha: ClassVar[bool] = False
    #: the peer starts from the suite's initial partition (``init_clusters`` or labels)
    starts_from_partition: ClassVar[bool] = False

    def __init__(self, family, **kwargs):
        super().__init__(family, **kwargs)
        if self.alpha_prior is not None and not self.learns_alpha:
            raise ValueError(f"{self.name!r} cannot learn alpha under a Gamma prior: alpha_prior must be None, "
                             f"got {tuple(self.alpha_prior)!r}")

    def init(self, X, init_clusters: int = RUN_DEFAULTS["init_clusters"], labels=None) -> State:
        """Validate ``X`` and start the peer from its own initialisation (see the class docstring).

        Raises
        ------
        ValueError
            ``labels`` were given, or bad data or ``init_clusters`` (as :meth:`Sampler.init`).
        """
        if labels is not None and not self.starts_from_partition:
            raise ValueError(f"{self.name!r} starts from its own initialisation ({self.settings()['initialisation']}); "
                             f"it cannot start from given labels")
        return super().init(X, init_clusters=init_clusters, labels=labels)

    @abstractmethod
    def settings(self) -> dict:
        """The peer's own settings, as it runs them: its prior, truncation, initialisation,
        tolerances and library version, with at least the key ``initialisation`` (JSON-serialisable; recorded in a run's metadata as
        ``peer_settings`` so that a default is never mistaken for a tuned comparison)."""
