"""The Schemas pages: the built-in schema registry's subjects, versions, diffs, compatibility,
registration (checked as you type) and deletes."""
