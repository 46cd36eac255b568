"""What the scheduler keeps: its SQLite database (the store, the file, its repair), the
changes the database must confirm, finished jobs' retention, and the job directories it
reads and writes only as their owner would."""
