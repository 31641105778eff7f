"""The steps of a publish, one module each; ``ableaudit.warehouse.publish`` runs them."""
