"""What people run: the `azjax` command line, terminal play and the web app (`azjax serve`).

May import every layer. Game knowledge (notation, rendering, labels) comes from the Env, so
a game that implements the contract gets `azjax play` and `azjax serve` with no change here.
"""
