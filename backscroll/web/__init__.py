"""The sessions sidebar: a static page the API serves at `/` and `/c/{id}`, and the transcript
endpoint it reads a conversation's messages from."""
