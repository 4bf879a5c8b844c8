"""What every stage shares: content hashes, the version, optional extras, allocation limits, hostile-file
checks and the misspelled-name error."""
