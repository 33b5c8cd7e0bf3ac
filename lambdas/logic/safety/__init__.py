"""What keeps the pipeline from acting wrongly, widely or twice: the pause switch, storm hold and
blast-radius guard; which approval decisions are accepted, from whom; and an approved reboot or
replacement carried out (checked first, the request written ahead, sent once along its path:
this pipeline's API call or HyperPod's own node health label)."""
