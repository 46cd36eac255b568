"""The scheduler's web port: the ``Backend`` operations the routes call (each with the access
it needs and its models), answered here (``local``) or by a shared scheduler (``remote``), and
what each caller may see of the state (``views``)."""
