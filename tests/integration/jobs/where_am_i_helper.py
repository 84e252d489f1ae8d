VALUE = "imported from beside the script"
