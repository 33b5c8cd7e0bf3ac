"""One thin module per Lambda entry point (`lambdas.handlers.<module>.handler`)."""
