"""The aetcd client class for an ``EtcdAccess`` (etcd_access.py).

aetcd 1.0 speaks user/password authentication (a token on every call) but
opens plain channels only: ``TlsClient`` is aetcd's ``Client`` whose
``connect`` opens a gRPC TLS channel (``grpc.ssl_channel_credentials``:
etcd's certificate checked against ``ca``, else the system roots; ``cert``
and ``key`` presented to an etcd with ``--client-cert-auth``). Everything
else, the token included, is aetcd's own.
"""

from __future__ import annotations


def client_class(access):
    """aetcd's ``Client``, or ``TlsClient`` when ``access.tls``."""
    import aetcd

    if access is None or not access.tls:
        return aetcd.Client
    return _tls_class(access)


def _tls_class(access):
    import grpc
    from aetcd import client as ac
    from aetcd import rpc, watcher

    credentials = grpc.ssl_channel_credentials(root_certificates=access.ca,
                                               private_key=access.key,
                                               certificate_chain=access.cert)

    class TlsClient(ac.Client):
        @ac._handle_errors
        async def connect(self) -> None:
            """aetcd's ``Client.connect`` over ``rpc.secure_channel``."""
            if self._connected.is_set():
                return
            if self._is_connecting:
                await ac.asyncio.wait_for(self._connected.wait(), self._connect_wait_timeout)
                return
            try:
                self._is_connecting = True
                self.channel = rpc.secure_channel(f"{self._host}:{self._port}", credentials,
                                                  options=self._options.items())
                if self._username is not None and self._password is not None:
                    self.auth_stub = rpc.AuthStub(self.channel)
                    resp = await self.auth_stub.Authenticate(rpc.AuthenticateRequest(
                        name=self._username, password=self._password), timeout=self._timeout)
                    self.metadata = (("token", resp.token),)
                self.kvstub = rpc.KVStub(self.channel)
                self.clusterstub = rpc.ClusterStub(self.channel)
                self.leasestub = rpc.LeaseStub(self.channel)
                self.maintenancestub = rpc.MaintenanceStub(self.channel)
                self._watcher = watcher.Watcher(rpc.WatchStub(self.channel),
                                                timeout=self._timeout, metadata=self.metadata)
                self._connected.set()
            finally:
                self._is_connecting = False

    return TlsClient
