/** The credentials of AWS's SigV4 documentation examples (their requests are signed with these). */
export const AWS_EXAMPLE = { accessKeyId: "AKIAIOSFODNN7EXAMPLE", secret: "wJalrXUtnFEMI/K7MDENG/bPxRfiCYEXAMPLEKEY" };
