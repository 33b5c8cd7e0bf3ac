"""One thin module per Lambda entry point (`sdc_remediation.lambdas.handlers.<module>.handler`)."""
