"""``paysign demo``: sellers to pay and a facilitator that settles, beside the service.

Everything here that takes or checks a payment is the official ``x402`` package (``x402[evm,
fastapi]``), not paysign's own signing code, so a payment the service signs is judged by code
nobody here wrote:

- :mod:`paysign.demo.sellers`: one HTTP app serving every listing of the demo catalog. The x402
  v2 listings sit behind the SDK's FastAPI payment middleware; ``random_fact`` is an x402 v1
  seller written by hand on the SDK's v1 models and its HTTP facilitator client (the SDK's
  middleware speaks v2 only). ``X-Sandbox-Mode: true`` routes a request to the sandbox endpoint
  (Base Sepolia, i.e. the dev chain); without it the request reaches the production endpoint
  (Base mainnet terms, verified but never settled here).
- :mod:`paysign.demo.facilitator`: the SDK's facilitator (``x402FacilitatorSync`` with its exact
  EVM schemes, v2 and v1, and its ``FacilitatorWeb3Signer``) over HTTP: ``/verify``, ``/settle``,
  ``/supported``, as the SDK's ``HTTPFacilitatorClient`` expects.
- :mod:`paysign.demo.runner`: the servers on threads, and ``paysign demo`` itself.

Only the ``demo`` extra (``pip install 'paysign[demo]'``; ``make install`` includes it) is
needed; nothing outside this package imports it.
"""
