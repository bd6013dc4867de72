"""Services: the platform's logic, free of ``request``; randomness arrives as an argument."""
