"""posenc inside other libraries' models, one optional module per library.

* :mod:`posenc.integrations.transformers` (extra ``posenc[transformers]``): switch a loaded Hugging
  Face transformers model to posenc's RoPE and back (:func:`~posenc.integrations.transformers.use_posenc_rope`),
  and register posenc's scalings in transformers' ``ROPE_INIT_FUNCTIONS``
  (:func:`~posenc.integrations.transformers.register_rope_types`).

Importing this package imports nothing else: each submodule imports its library when it is imported.
"""

__all__: list[str] = []
