"""The HTTP API: the JSON endpoints, their errors and the request plumbing they share with the
sidebar (`deps`). The application that mounts them is `backscroll.app.create_app`."""
