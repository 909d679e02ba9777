"""Bad inputs a user can give, one file per entry point; tests/test_bad_inputs.py runs them."""
