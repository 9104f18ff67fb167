"""The PyTorch networks of the built-in design spaces, one module per space, imported when a
space builds a network. Sampling, closed-form features and screening never need one: a screening
of a million candidates that imported torch spent 1.9 s of its 10 s budget on that import."""
