"""Who a request comes from and what it may do: tokens, scopes and the access decision."""
