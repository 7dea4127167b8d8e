"""Ray layer: actor classes, launcher (local Ray or `address=`), and the driver loop."""
