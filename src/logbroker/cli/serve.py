"""``logbroker serve``: run the broker until SIGTERM or SIGINT."""

from __future__ import annotations

import asyncio
import logging
import signal
import sys

import click

from ..broker.config import LEVELS, BrokerConfig
from ..broker.fdlimit import raise_open_file_limit
from ..broker.kafka_listeners import parse_option as parse_listener


@click.command()
@click.option("--data-dir", default=None, type=click.Path(file_okay=False),
              help="Data directory [default: ./data].")
@click.option("--host", default=None, help="Address to listen on [default: 127.0.0.1].")
@click.option("--port", default=None, type=int, help="Port [default: 9555; 0 picks a free one].")
@click.option("--config", "config_path", default=None, type=click.Path(dir_okay=False),
              help="TOML config file (flags override it).")
@click.option("--log-level", default=None, type=click.Choice(LEVELS))
@click.option("--flush", default=None, type=click.Choice(["fsync", "lazy"]),
              help="Durability of acks: fsync before acking (default) or lazy.")
@click.option("--broker-id", default=None, type=click.IntRange(0, 2**31 - 1),
              help="This broker's id in a cluster [default: 0].")
@click.option("--etcd", default=None, metavar="URL",
              help="Join the cluster whose metadata is in etcd at URL (http://HOST:PORT); "
                   "without it the broker runs alone.")
@click.option("--advertised-address", default=None, metavar="HOST:PORT",
              help="Where clients and other brokers reach this broker [default: host:port].")
@click.option("--cluster-name", default=None, help="The cluster's key prefix in etcd [default: logbroker].")
@click.option("--metrics-port", default=None, type=click.IntRange(0, 65535),
              help="Serve Prometheus metrics at http://HOST:PORT/metrics [default: off].")
@click.option("--tls-cert", default=None, type=click.Path(dir_okay=False),
              help="PEM certificate chain: the listener speaks TLS (needs --tls-key).")
@click.option("--tls-key", default=None, type=click.Path(dir_okay=False), help="PEM private key of --tls-cert.")
@click.option("--tls-ca", default=None, type=click.Path(dir_okay=False),
              help="PEM CA bundle to verify client certificates and other brokers.")
@click.option("--tls-client-auth", is_flag=True, default=None,
              help="Mutual TLS: require a client certificate signed by --tls-ca.")
@click.option("--auth-required", is_flag=True, default=None,
              help="Refuse clients that have not authenticated (SCRAM-SHA-256).")
@click.option("--console-port", default=None, type=click.IntRange(0, 65535),
              help="Serve the read-only web console at http://HOST:PORT/ [default: off].")
@click.option("--max-connections-per-ip", default=None, type=click.IntRange(1),
              help="Connections accepted from one address [default: 1024]; per-address "
                   "overrides and quotas go in the config file (docs/security.md).")
@click.option("--kafka-port", default=None, type=click.IntRange(0, 65535),
              help="Also speak the Kafka protocol on HOST:PORT (0 picks a free one) "
                   "[default: off; docs/kafka.md].")
@click.option("--kafka-advertised", default=None, metavar="HOST:PORT",
              help="The address Kafka clients are told to use [default: host:kafka port].")
@click.option("--kafka-listener", "kafka_listener", multiple=True,
              metavar="name=N,port=P[,host=H][,advertised=H:P][,security=S]",
              help="A Kafka listener of its own (repeatable; instead of --kafka-port): S is "
                   "PLAINTEXT, SSL, SASL_PLAINTEXT or SASL_SSL (docs/kafka.md, \"Listeners\").")
def serve(data_dir, host, port, config_path, log_level, flush, broker_id, etcd,
          advertised_address, cluster_name, metrics_port, tls_cert, tls_key, tls_ca,
          tls_client_auth, auth_required, console_port, max_connections_per_ip,
          kafka_port, kafka_advertised, kafka_listener) -> None:
    """Run the broker on DATA_DIR (recovering it first) until SIGTERM/SIGINT."""
    raise_open_file_limit()  # before the config sizes the segment descriptor cache from it
    config = BrokerConfig.load(config_path, data_dir=data_dir, host=host, port=port,
                               log_level=log_level, broker_id=broker_id, etcd=etcd,
                               advertised_address=advertised_address, cluster_name=cluster_name,
                               metrics_port=metrics_port, tls_cert=tls_cert, tls_key=tls_key,
                               tls_ca=tls_ca, tls_client_auth=tls_client_auth,
                               auth_required=auth_required, console_port=console_port,
                               max_connections_per_ip=max_connections_per_ip,
                               kafka_port=kafka_port, kafka_advertised=kafka_advertised,
                               kafka_listeners=[parse_listener(t) for t in kafka_listener]
                               or None)
    if flush is not None:
        from dataclasses import replace

        config = replace(config, storage=replace(config.storage, log=config.storage.log.replace(flush=flush)))
    logging.basicConfig(level=config.log_level.upper(), stream=sys.stderr,
                        format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    asyncio.run(_run(config))
    # stopped cleanly: a signal from now on is ignored, not the default action (Python's
    # exit puts that back for signals it handles, and it would end the process by SIGTERM)
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, signal.SIG_IGN)


async def _run(config: BrokerConfig) -> None:
    from ..broker.server import Broker

    broker = Broker(config)
    loop = asyncio.get_running_loop()

    def on_signal(signum, frame) -> None:
        try:
            loop.call_soon_threadsafe(broker.stop)
        except RuntimeError:  # the loop is closed: stopped cleanly, the process is exiting
            pass

    # Python-level handlers, not the loop's: asyncio restores the default action when the
    # loop closes, and a supervisor's second SIGTERM would then kill the exiting process
    for sig in (signal.SIGTERM, signal.SIGINT):
        signal.signal(sig, on_signal)

    def ready(b: Broker) -> None:
        # One line on stdout that scripts and tests wait for.
        # The zero-config single node is open on loopback and says so (docs/security.md).
        print(f"{READY}{config.host}:{b.port}{_open_note(config)}", flush=True)
        if b.metrics is not None:  # a second line, only with metrics on (docs/metrics.md)
            print(f"logbroker metrics on {b.metrics.url}", flush=True)
        if b.console is not None:  # and with the console on (docs/console.md)
            print(f"logbroker console on {b.console.url}", flush=True)
        if b.kafka is not None:  # and with the Kafka listener on (docs/kafka.md)
            print(f"{KAFKA_READY}{b.kafka.advertised}", flush=True)
        for kafka in b.kafka_listeners[1:]:  # one more line per further listener
            print(f"{KAFKA_LISTENER_READY}{kafka.spec.name} {kafka.advertised}", flush=True)

    await broker.run(ready)


READY = "logbroker listening on "
KAFKA_READY = "logbroker kafka on "
KAFKA_LISTENER_READY = "logbroker kafka listener "  # NAME HOST:PORT of each further listener


def parse_ready(line: str) -> "tuple[str, int] | None":
    """``(host, port)`` of the broker's first stdout line
    (``logbroker listening on HOST:PORT[ (note)]``), or None if ``line`` is
    not that line: the one parser for tests, benches and tools."""
    if not line.startswith(READY):
        return None
    host, sep, port = line[len(READY):].split(" ", 1)[0].strip().rpartition(":")
    return (host, int(port)) if sep and port.isdigit() else None


def _open_note(config: BrokerConfig) -> str:
    """`` (open: ...)`` after the ready line's address when anyone who can
    connect may do anything; a warning in the log off loopback."""
    import ipaddress

    if config.auth_required:
        if not config.super_users:
            logging.getLogger("logbroker.broker").warning(
                "ACLs are not enforced: every authenticated user may do anything (set "
                "super_users to enforce them; docs/security.md, \"Authorization\")")
        return ""
    try:
        loopback = ipaddress.ip_address(config.host.strip("[]")).is_loopback
    except ValueError:
        loopback = config.host == "localhost"
    if loopback:  # a cluster's brokers on loopback are a test rig: no note (nor warning)
        return "" if config.etcd is not None else " (open: no authentication, loopback only)"
    logging.getLogger("logbroker.broker").warning(
        "no authentication on %s: anyone who can connect may do anything (auth_required; "
        "docs/security.md)", config.host)
    return ""
