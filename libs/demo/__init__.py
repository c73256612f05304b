"""`podway demo`: the stack on embedded defaults and a checked walk through every capability (`run`), one
module of steps per capability, all on the helpers of `steps`."""
