"""What a chaos run sets up and must clean away: on the cluster its topics (and its
group), on this machine its member processes, its working directory, an admin client,
the numbered producer and, for a scenario with faults, a `kgctl proxy`.

Safety is the point of this module. Before any client is built, `check_safety` refuses
what cannot be undone on someone else's cluster; `claim` refuses a group or topics that
exist already (the run would damage what it did not create) and records what the run
did create; `close` ends every process the run started and deletes only what `claim`
recorded. Each is called by the runner in that order; a new resource is one more
attribute here, opened in the runner's setup and closed in `close`.
"""

from __future__ import annotations

import contextlib
import ipaddress
import socket
import tempfile
from collections.abc import Callable
from dataclasses import replace
from pathlib import Path

from kgctl.adapters.chaos import ChaosAdmin, NumberedProducer
from kgctl.chaos.fleet import Fleet
from kgctl.chaos.options import RunOptions
from kgctl.chaos.plan import FleetPlan
from kgctl.errors import SetupError, UsageError
from kgctl.model.events import Event
from kgctl.proxy.runner import ProxyConfig, ProxyThread
from kgctl.settings import ClientSettings


def is_loopback(bootstrap: str) -> bool:
    """Every bootstrap host is a loopback address (or resolves only to loopback)."""
    for part in bootstrap.split(","):
        host = part.strip().rpartition(":")[0].strip("[]")
        try:
            if not ipaddress.ip_address(host).is_loopback:
                return False
            continue
        except ValueError:
            pass
        try:
            infos = socket.getaddrinfo(host, None)
        except OSError:
            return False
        if not infos or not all(ipaddress.ip_address(i[4][0]).is_loopback for i in infos):
            return False
    return True


class RunResources:
    """The clients, processes and cluster objects of one run, and what it may delete."""

    def __init__(self, settings: ClientSettings, options: RunOptions, run_id: str) -> None:
        self.settings = settings
        self.options = options
        self.workdir = Path(tempfile.mkdtemp(prefix=f"kgctl-chaos-{run_id}-"))
        self.fleet = Fleet(settings, self.workdir)
        self.admin: ChaosAdmin | None = None
        self.producer: NumberedProducer | None = None
        # Started when the scenario has fault rules; the fleet connects through it.
        self.proxy: ProxyThread | None = None
        self.replication = 1  # the topics' replication factor, once the cluster is known
        # What `close` may delete: only what this run created, never a group or topics
        # that existed before it (refused, or acted on with --allow-destructive).
        self.created_topics = False
        self.owns_group = False
        # {topic id: name} of the run's topics, for consumer-protocol app members' answers.
        self.topic_names: dict[str, str] = {}

    def check_safety(self, plan: FleetPlan) -> None:
        """Refuse an irreversible action on a cluster that is not local, unless allowed;
        needs no connection."""
        grows = [s for s in plan.scenario.steps if s.action == "partition-growth"]
        if (
            grows
            and not is_loopback(self.settings.bootstrap)
            and not self.options.allow_destructive
        ):
            what = ", ".join(f"{s.args['topic']} to {s.args['to']}" for s in grows)
            raise UsageError(
                f"{self.settings.bootstrap} is not a local cluster and this scenario grows "
                f"partitions (irreversible): {what} on kgctl's own topics under "
                f"{plan.topic_base}*; pass --allow-destructive to do it"
            )

    def connect(self) -> ChaosAdmin:
        self.admin = ChaosAdmin(self.settings)
        return self.admin

    def claim(self, plan: FleetPlan) -> None:
        """Make the run's topics, after checking the cluster can hold the (fitted) fleet
        and that neither the group nor the topics are someone else's."""
        admin = self.admin
        assert admin is not None, "connect() first"
        sc = plan.scenario
        brokers = admin.broker_count()
        if sc.fleet.brokers > brokers:
            raise SetupError(
                f"scenario {sc.name} needs a {sc.fleet.brokers}-broker cluster; "
                f"{self.settings.bootstrap} has {brokers} (kgctl broker up --brokers 3)"
            )
        existed = bool(self.options.group) and admin.group_exists(plan.group)
        if existed and not self.options.allow_destructive:
            raise UsageError(
                f"group {plan.group} already exists and kgctl did not create it; chaos would "
                "join it, rebalance it and commit offsets in it: pass --allow-destructive"
            )
        existing = admin.existing_topics() & set(plan.topics.values())
        if existing:
            raise UsageError(
                f"topics {', '.join(sorted(existing))} already exist; kgctl creates its own"
            )
        self.owns_group = not existed
        self.replication = min(3, brokers)
        # None of them existed: whatever gets created under these names is the run's
        # (topics actions create later are under the same prefix, in the same plan).
        self.created_topics = True
        admin.create_topics(
            {plan.topics[t]: n for t, n in plan.partitions.items()}, self.replication
        )
        if plan.traces_topic_ids():
            self.learn_topic_ids([plan.topics[t] for t in plan.partitions])

    def learn_topic_ids(self, topics: list[str]) -> None:
        """Remember the ids of topics the run made: consumer-protocol answers on the wire
        name topics by id (kgctl/model/wire.py names them by this map)."""
        if self.admin is not None:
            self.topic_names.update(self.admin.topic_ids(topics))

    def start_producer(self, run_id: str) -> NumberedProducer:
        self.producer = NumberedProducer(self.settings, run_id)
        return self.producer

    def start_proxy(
        self,
        config: ProxyConfig | None = None,
        read: Callable[[Event], list[Event]] = lambda e: [e],
    ) -> ProxyThread:
        """A `kgctl proxy` in this process between the fleet and the cluster (the admin
        client and the producer stay direct); its events join the members' on the
        fleet's queue, so the pump handles them in the order they came. `read` turns
        each into the events the run keeps (an app member's steps named after it)."""

        def deliver(event: Event) -> None:
            for e in read(event):
                self.fleet.queue.put(("event", "proxy", e))

        self.proxy = ProxyThread(self.settings, config, deliver)
        self.proxy.start()
        self.fleet.settings = replace(self.settings, bootstrap=self.proxy.bootstrap)
        return self.proxy

    def close(self, plan: FleetPlan) -> None:
        """End every process, close every client, delete what `claim` recorded as the
        run's (unless --keep-topics) and the working directory. Members first: nothing
        of the run may outlive it, whatever fails after."""
        with contextlib.suppress(Exception):
            self.fleet.close(grace_s=10)
        if self.proxy is not None:
            self.proxy.close()
        if self.producer is not None:
            with contextlib.suppress(Exception):
                self.producer.close()
        if self.admin is not None:
            if not self.options.keep_topics:
                if self.created_topics:
                    self.admin.delete_topics(list(plan.topics.values()))
                if self.owns_group:
                    self.admin.delete_group(plan.group)
            self.admin.close()
        with contextlib.suppress(OSError):
            for p in self.workdir.iterdir():
                p.unlink()
            self.workdir.rmdir()
