"""The front-ends: thin adapters over :mod:`acp_kernel.client.controller`.

``kernel`` and ``kernel_io`` (the ACP kernel on ipykernel), ``cli`` (the
headless client), ``api`` (``await acp_kernel.connect(...)``), ``ask``
(questions on stdin), ``cells`` and ``complete`` (what a kernel cell says),
``shellcell`` (``%%shell``), ``install`` (kernelspecs), ``papermill``.
The magics live in :mod:`acp_kernel.magics`.
"""
