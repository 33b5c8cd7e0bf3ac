"""What keeps the pipeline from acting wrongly, widely or twice: the pause switch, storm hold and
blast-radius guard; which approval decisions are accepted; an approved reboot or replacement
carried out (checked first, the request written ahead, sent once along its path); and the
reconciliation of incidents nothing else will move."""
